"""engineer package."""
