"""The error every config problem raises: one or more lines, each naming the file, the key and the fix."""

from __future__ import annotations


class ConfigError(Exception):
    """A config that cannot run. ``problems`` holds one line per problem."""

    def __init__(self, problems: str | list[str]) -> None:
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        super().__init__("\n".join(self.problems))

    def __str__(self) -> str:
        if len(self.problems) == 1:
            return self.problems[0]
        return f"{len(self.problems)} problems in the config:\n" + "\n".join(f"  - {p}" for p in self.problems)
