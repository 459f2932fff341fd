"""``mindforge hcp``: validate, show, diff, hash and register HCP contracts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from mindforge.cli.output import print_json
from mindforge.errors import InputError
from mindforge.experience.contract import describe_experience, experience_content_keys, experience_summary
from mindforge.hcp import (
    ContractRegistry,
    HCPContract,
    canonical_json,
    diff_contracts,
    format_diff,
    load_contract,
)
from mindforge.hcp.diff import flatten

app = typer.Typer(help="HCP contracts: validate, show, diff, hash, register.", no_args_is_help=True)

_PREVIEW_CHARS = 70


def _err(message: str) -> None:
    Console(stderr=True, soft_wrap=True).print(f"[red]error:[/] {escape(message)}", highlight=False)


def _load_or_exit(path: Path) -> HCPContract:
    try:
        return load_contract(path)
    except InputError as exc:
        _err(str(exc))
        raise typer.Exit(1) from None


@app.command()
def validate(files: Annotated[list[Path], typer.Argument(help="Contract files (TOML).")]) -> None:
    """Validate contracts; exit 1 if any is invalid. Unknown keys are kept and listed."""
    console = Console()
    failed = 0
    for path in files:
        try:
            contract = load_contract(path)
        except InputError as exc:
            _err(str(exc))
            failed += 1
            continue
        console.print(f"[green]ok[/green] {escape(str(path))}  {escape(contract.ref)}  {contract.content_hash[:16]}")
        unknown = contract.unknown_keys()
        if unknown:
            console.print(f"   kept unknown keys: {escape(', '.join(unknown))}")
    if failed:
        raise typer.Exit(1)


def _preview(value: Any) -> str:
    if isinstance(value, str):
        lines = value.splitlines() or [""]
        text = lines[0]
        if len(lines) > 1 or len(text) > _PREVIEW_CHARS:
            text = f"{text[:_PREVIEW_CHARS]}... ({len(lines)} line(s), {len(value)} chars)"
        return json.dumps(text, ensure_ascii=False)
    return json.dumps(value, ensure_ascii=False, default=str)


@app.command()
def show(
    file: Annotated[Path, typer.Argument(help="Contract file (TOML).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document instead of tables.")] = False,
) -> None:
    """Show a contract section by section, with its identity and content hash."""
    contract = _load_or_exit(file)
    if as_json:
        print_json(show_document(contract, file))
        return
    console = Console()
    ident = contract.mindforge
    console.print(f"[bold]{escape(contract.ref)}[/bold]  (HCP version {contract.version})  {escape(str(file))}")
    console.print(f"  content hash  {contract.content_hash}")
    console.print(f"  parent        {escape(ident.parent or '(root)')}")
    if ident.edit:
        console.print(f"  edit          {escape(ident.edit)}")
    if ident.description:
        console.print(f"  description   {escape(ident.description)}")
    if contract.resources.experience is not None:
        console.print(f"  experience    {escape(experience_summary(contract))}")
    document = contract.to_document()
    for section, body in document.items():
        if section in ("version", "mindforge"):
            continue
        table = Table(title=escape(f"[{section}]"), title_justify="left", show_header=False, expand=False)
        table.add_column("key", style="cyan", no_wrap=True)
        table.add_column("value")
        embedded = body.pop("embedded", []) if section == "resources" and isinstance(body, dict) else []
        rows = flatten(body) if isinstance(body, dict) else {"": body}
        for key, value in rows.items():
            table.add_row(escape(key), escape(_preview(value)))
        console.print(table)
        if embedded:
            files = Table(title=escape("[[resources.embedded]]"), title_justify="left")
            for column in ("path", "kind", "encoding", "bytes", "sha256"):
                files.add_column(column)
            for item in contract.resources.embedded:
                files.add_row(
                    escape(item.path), escape(item.kind), item.encoding, str(len(item.data)), item.sha256[:16]
                )
            console.print(files)
    unknown = contract.unknown_keys()
    if unknown:
        console.print(f"kept unknown keys: {escape(', '.join(unknown))}")


def show_document(contract: HCPContract, path: Path) -> dict[str, Any]:
    """``mindforge hcp show --json``: a contract's identity, content hash and full document.

    Returns:
        ``{"path", "ref", "version", "content_hash", "name", "revision", "parent",
        "edit", "description", "unknown_keys", "experience", "document"}``: ``experience``
        is the snapshot's hash, entry counts, ``k`` and filter (null without one); ``document`` is the
        resolved contract (defaults filled in, unknown keys kept) as the content hash
        sees it, TOML dates and times tagged as in :func:`mindforge.hcp.canonical_json`;
        ``parent`` is null for a root contract.
    """
    ident = contract.mindforge
    return {
        "path": str(path),
        "ref": contract.ref,
        "version": contract.version,
        "content_hash": contract.content_hash,
        "name": ident.name,
        "revision": ident.revision,
        "parent": ident.parent or None,
        "edit": ident.edit,
        "description": ident.description,
        "unknown_keys": contract.unknown_keys(),
        "experience": describe_experience(contract),
        "document": json.loads(canonical_json(contract.to_document())),
    }


@app.command()
def diff(
    a: Annotated[Path, typer.Argument(help="The old contract.")],
    b: Annotated[Path, typer.Argument(help="The new contract.")],
    identity: Annotated[bool, typer.Option(help="Include \\[mindforge] (name, revision, parent, edit).")] = True,
) -> None:
    """Print what changed from A to B, one line per key path (+ added, - removed, ~ changed).

    An experience snapshot's content is summarised (hash, entries by provenance, k) rather than diffed.
    """
    old, new = _load_or_exit(a), _load_or_exit(b)
    changes = diff_contracts(old, new, include_identity=identity)
    hidden = experience_content_keys(old) | experience_content_keys(new)
    shown = [change for change in changes if change.key not in hidden]
    lines = [format_diff(shown)] if shown else []
    if len(shown) < len(changes) or (old.resources.experience is None) != (new.resources.experience is None):
        lines.append(f"~ experience: {experience_summary(old)} -> {experience_summary(new)}")
    typer.echo("\n".join(lines) if lines else "no differences")


@app.command("hash")
def hash_(files: Annotated[list[Path], typer.Argument(help="Contract files (TOML).")]) -> None:
    """Print each contract's content hash (sha256 of its canonical form) and path."""
    failed = 0
    for path in files:
        try:
            typer.echo(f"{load_contract(path).content_hash}  {path}")
        except InputError as exc:
            _err(str(exc))
            failed += 1
    if failed:
        raise typer.Exit(1)


@app.command()
def register(
    files: Annotated[list[Path], typer.Argument(help="Contract files (TOML).")],
    registry: Annotated[Path | None, typer.Option(help="Registry directory; default <data_dir>/contracts.")] = None,
) -> None:
    """Register contracts (immutable: same name@revision with other content is refused)."""
    if registry is None:
        from mindforge.settings import get_settings

        registry = get_settings().data_dir / "contracts"
    store = ContractRegistry(registry)
    failed = 0
    for path in files:
        try:
            contract = load_contract(path)
            typer.echo(f"{contract.ref}  {contract.content_hash[:16]}  {store.register(contract)}")
        except InputError as exc:
            _err(str(exc))
            failed += 1
    if failed:
        raise typer.Exit(1)
