"""The run's configuration: one flat class per TOML section, the base they share, and the limits."""
