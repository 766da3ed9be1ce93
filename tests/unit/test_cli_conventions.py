"""What a platform team expects of a CLI it runs every week, run as the installed `rackcert`.

Each test runs the real console script with stdout on a pipe (as in CI), so the
non-terminal behaviour is what is tested.
"""

from __future__ import annotations


def test_every_listed_command_answers_help(capsys):
    """A command that exists in --help works: each one (and each group's) answers --help."""
    import typer

    from rackcert.cli import app, main

    root = typer.main.get_command(app)
    paths = []
    for name, cmd in root.commands.items():
        paths.append([name])
        paths += [[name, sub] for sub in getattr(cmd, "commands", {})]
    assert len(paths) > 15
    for path in paths:
        assert main([*path, "--help"]) == 0, path
        out = capsys.readouterr().out
        assert "Usage: rackcert" in out, path
        assert "<bool>" not in out, path
