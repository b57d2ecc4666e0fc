"""The README's list of configuration keys is generated from the config table."""

from pathlib import Path

from krust.config import reference

README = Path(__file__).parents[2] / "README.md"


def test_the_readme_lists_every_key_of_the_config_table() -> None:
    document = README.read_text()

    assert reference.rewrite(document) == document, (
        "README.md's configuration keys are out of date: run "
        "`python -m krust.config.reference README.md`"
    )


def test_a_refused_key_says_only_its_default_is_accepted() -> None:
    table = reference.markdown()

    preallocate = next(line for line in table.splitlines() if "**log.preallocate**" in line)
    assert preallocate.startswith("- **log.preallocate** (boolean, default `false`")
    assert "Only the default is accepted" in preallocate
