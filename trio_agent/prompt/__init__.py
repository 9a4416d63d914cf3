"""The system prompt: ``ctx.system_prompt`` sections, variables, assembly and rendering.

Mount :class:`SystemPrompt` (``await ctx.plugin(SystemPrompt, {"persona": "..."})``), register
sections and variables (globally, or per agent through ``agent.ctx.system_prompt``), then per
request ``assembly = await ctx.system_prompt.assemble(agent)`` and
``ctx.system_prompt.render(assembly)``.
"""

from ._errors import PromptConflictError as PromptConflictError
from ._errors import PromptDefinitionError as PromptDefinitionError
from ._errors import PromptError as PromptError
from ._errors import PromptVariableError as PromptVariableError
from ._render import render_prompt as render_prompt
from ._service import SystemPrompt as SystemPrompt
from ._types import AgentLike as AgentLike
from ._types import PromptAssembleRequest as PromptAssembleRequest
from ._types import PromptAssembly as PromptAssembly
from ._types import PromptSection as PromptSection
from ._types import SectionText as SectionText
from ._types import VariableProvider as VariableProvider

__all__ = [
    "AgentLike",
    "PromptAssembleRequest",
    "PromptAssembly",
    "PromptConflictError",
    "PromptDefinitionError",
    "PromptError",
    "PromptSection",
    "PromptVariableError",
    "SectionText",
    "SystemPrompt",
    "VariableProvider",
    "render_prompt",
]
