"""Tests for trio_agent.usage."""
