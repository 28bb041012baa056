"""curriculum package."""
