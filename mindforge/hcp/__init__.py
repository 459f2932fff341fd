"""HCP (Harness Context Protocol) contracts: model, TOML load/dump, hashing, diff, lineage.

An HCP contract is a TOML file carrying everything the harness decides around the
model (endpoint, model and adapter, prompts, tools, skills, hooks, workspace). The shape
follows Mind Lab's draft HCP RFC-0002, plus MindForge's ``[mindforge]`` section for
identity and lineage (docs/design.md, "The HCP contract").

Typical use::

    contract = load_contract("hcp_contracts/baseline.toml")   # validated at load
    contract.content_hash                                    # sha256 hex
    child = derive(contract, revision="1.1.0", edit="plan first", changes={"hooks.plan_first": True})
    print(format_diff(diff_contracts(contract, child)))
    ContractRegistry(root).register(child)
"""

from mindforge.hcp.derive import apply_changes, derive, make_embedded
from mindforge.hcp.diff import ContractChange, diff_contracts, flatten, format_diff
from mindforge.hcp.examples import ExampleStep, WorkedExample
from mindforge.hcp.folder_registry import (
    ContractImmutableError,
    ContractRegistry,
    check_registration,
    parse_ref,
)
from mindforge.hcp.io import (
    ContractError,
    contract_from_document,
    dump_contract,
    find_secrets,
    load_contract,
    loads_contract,
    save_contract,
)
from mindforge.hcp.model import HCP_VERSION, HCPContract, canonical_json
from mindforge.hcp.sections import (
    ACTION_FORMATS,
    EXPERIENCE_KIND,
    EXPERIENCE_KS,
    EXPERIENCE_PATH,
    KNOWN_TOOLS,
    SHELL_FORMATS,
    EmbeddedResource,
    ExperienceSettings,
    HooksSection,
    MindForgeSection,
    ModelSection,
    PromptsSection,
    ProviderOptions,
    ResourcesSection,
    SkillsSection,
    ToolsSection,
    WorkspaceSection,
)

__all__ = [
    "ACTION_FORMATS",
    "EXPERIENCE_KIND",
    "EXPERIENCE_KS",
    "EXPERIENCE_PATH",
    "HCP_VERSION",
    "KNOWN_TOOLS",
    "SHELL_FORMATS",
    "ContractChange",
    "ContractError",
    "ContractImmutableError",
    "ContractRegistry",
    "EmbeddedResource",
    "ExperienceSettings",
    "ExampleStep",
    "HCPContract",
    "HooksSection",
    "MindForgeSection",
    "ModelSection",
    "PromptsSection",
    "ProviderOptions",
    "ResourcesSection",
    "SkillsSection",
    "ToolsSection",
    "WorkedExample",
    "WorkspaceSection",
    "apply_changes",
    "canonical_json",
    "check_registration",
    "contract_from_document",
    "derive",
    "diff_contracts",
    "dump_contract",
    "find_secrets",
    "flatten",
    "format_diff",
    "load_contract",
    "loads_contract",
    "make_embedded",
    "parse_ref",
    "save_contract",
]
