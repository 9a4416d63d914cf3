"""Tests for trio_agent.otel."""
