"""Tests for trio_agent.compaction."""
