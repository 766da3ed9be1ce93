"""The node's container stack: the NVIDIA Container Toolkit, its CDI spec, the runtimes."""

from __future__ import annotations

from validation import parsers
from validation.facts.base import Fact


class CtkVersion(Fact):
    """`nvidia-ctk --version`: the Container Toolkit's version (None when it names none)."""

    key = "container_toolkit"
    tool = "nvidia-ctk"

    def command(self) -> str:
        return "nvidia-ctk --version"

    def process(self, output: list[str]) -> str | None:
        return parsers.ctk_version("\n".join(output))


class CdiGpus(Fact):
    """`nvidia-ctk cdi list`: the numbered GPU devices a container can ask for."""

    key = "cdi_gpus"
    tool = "nvidia-ctk"

    def command(self) -> str:
        return "nvidia-ctk cdi list"

    @staticmethod
    def default() -> list[str]:
        return []

    def process(self, output: list[str]) -> list[str]:
        return parsers.cdi_gpus("\n".join(output))


class DockerRuntimes(Fact):
    """`docker info`: the runtimes docker knows (None when it printed no runtime list)."""

    key = "docker_runtimes"
    tool = "docker"

    def command(self) -> str:
        return "docker info --format '{{json .Runtimes}}'"

    def process(self, output: list[str]) -> list[str] | None:
        return parsers.docker_runtimes("\n".join(output))


class ContainerdNvidia(Fact):
    """`containerd config dump`: whether a runtime runs nvidia-container-runtime."""

    key = "containerd_nvidia"
    tool = "containerd"

    def command(self) -> str:
        return "containerd config dump"

    def process(self, output: list[str]) -> bool:
        return any("nvidia-container-runtime" in line for line in output)


FACTS = (CtkVersion, CdiGpus, DockerRuntimes, ContainerdNvidia)
