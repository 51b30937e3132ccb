"""Tool policy: effect declarations, and the shell check that proves a command read-only."""

from plangate.policy.effects import Effect, declare_effect, effect_of, read_only

__all__ = ["Effect", "declare_effect", "effect_of", "read_only"]
