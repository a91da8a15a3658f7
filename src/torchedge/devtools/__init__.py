"""Developer tools (AOT side, may import torch): differential kernel checks and coverage reports."""
