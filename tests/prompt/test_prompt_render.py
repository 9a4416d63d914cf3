"""render(): strict {{name}} interpolation, dropping empty sections, blank-line joins."""

from __future__ import annotations

import pytest

from trio_agent.prompt import PromptAssembly, PromptSection, PromptVariableError, render_prompt


def assembly(*sections: tuple[str, str], **variables: str | None) -> PromptAssembly:
    return PromptAssembly(tuple(PromptSection(n, t) for n, t in sections), (), variables)


def test_interpolates_and_joins() -> None:
    rendered = render_prompt(
        assembly(("a", "  Hi {{name}}!\n"), ("b", "cwd={{cwd}} {{name}}"), name="Ada", cwd="/w")
    )
    assert rendered == "Hi Ada!\n\ncwd=/w Ada"


def test_empty_sections_are_dropped() -> None:
    rendered = render_prompt(
        assembly(("a", "A"), ("blank", " \n "), ("var", "{{e}}"), ("b", "B"), e="")
    )
    assert rendered == "A\n\nB"
    assert render_prompt(PromptAssembly()) == ""


def test_substituted_values_are_not_rescanned() -> None:
    rendered = render_prompt(assembly(("a", "{{x}}"), x="{{y}} and {{Not Valid}}"))
    assert rendered == "{{y}} and {{Not Valid}}"


def test_unclosed_braces_are_literal() -> None:
    assert render_prompt(assembly(("a", "use {{ like this"))) == "use {{ like this"
    assert render_prompt(assembly(("a", 'json: {"k": 1}'))) == 'json: {"k": 1}'


def test_unknown_variable_names_section_and_variable() -> None:
    with pytest.raises(PromptVariableError) as info:
        render_prompt(assembly(("ok", "fine"), ("intro", "Hello {{nmae}}"), name="Ada", cwd="/"))
    assert str(info.value) == (
        'unknown prompt variable "{{nmae}}" in section "intro"; registered variables: cwd, name; '
        "register it with system_prompt.variable('nmae', provider) or fix the section"
    )
    assert (info.value.section, info.value.variable, info.value.registered) == (
        "intro",
        "nmae",
        ("cwd", "name"),
    )


def test_unknown_variable_with_none_registered() -> None:
    with pytest.raises(PromptVariableError, match="registered variables: \\(none\\)"):
        render_prompt(assembly(("s", "{{x}}")))


def test_variable_without_value() -> None:
    with pytest.raises(PromptVariableError) as info:
        render_prompt(assembly(("env", "cwd: {{cwd}}"), cwd=None))
    assert str(info.value) == (
        'prompt variable "{{cwd}}" in section "env" has no value for this assembly '
        "(its provider returned None)"
    )


@pytest.mark.parametrize("reference", ["{{}}", "{{ name }}", "{{Name}}", "{{a-b}}", "{{{name}}}"])
def test_malformed_references(reference: str) -> None:
    with pytest.raises(PromptVariableError, match="malformed prompt variable reference") as info:
        render_prompt(assembly(("s", f"x {reference} y"), name="n"))
    assert info.value.section == "s"
