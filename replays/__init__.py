"""replays package."""
