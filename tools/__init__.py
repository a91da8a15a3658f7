"""The project's own scripts and QA machinery: run from a source checkout, not shipped in the wheel
(``pyproject.toml`` packages ``src/`` only)."""
