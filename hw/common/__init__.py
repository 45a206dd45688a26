"""Pieces shared by several engines."""
