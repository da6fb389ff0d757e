"""Utility and privacy metrics shared by every family."""
