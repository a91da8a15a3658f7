"""The `.pte` program schema as plain Python data (no torch, no flatbuffers)."""
