"""Collecting measurements and writing the results table (markdown) and plots (PNG)."""

from __future__ import annotations

import os
import platform
import statistics
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

BROKERS = ("kafka", "krust")


class Better(Enum):
    HIGHER = "higher"
    LOWER = "lower"


@dataclass(frozen=True)
class Metric:
    group: str
    name: str
    unit: str
    better: Better
    # The target for krust/Kafka, reported and never asserted.
    target_ratio: float | None = None
    # Table headings: what the "kafka" and "krust" values are, and their ratio.
    columns: tuple[str, str, str] = ("Kafka", "krust", "krust/Kafka")


@dataclass
class Results:
    values: dict[Metric, dict[str, list[float]]] = field(default_factory=dict)
    latency_samples_ms: dict[str, list[float]] = field(default_factory=dict)
    ceilings: dict[str, list[float]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    def add(self, metric: Metric, broker: str, value: float) -> None:
        self.values.setdefault(metric, {}).setdefault(broker, []).append(value)

    def median(self, metric: Metric, broker: str) -> float | None:
        samples = self.values.get(metric, {}).get(broker)
        return statistics.median(samples) if samples else None


def _ratio(results: Results, metric: Metric) -> float | None:
    kafka, krust = results.median(metric, "kafka"), results.median(metric, "krust")
    if kafka is None or krust is None or kafka == 0:
        return None
    return krust / kafka


def _verdict(metric: Metric, ratio: float | None) -> str:
    if metric.target_ratio is None or ratio is None:
        return ""
    met = (
        ratio >= metric.target_ratio
        if metric.better is Better.HIGHER
        else ratio <= metric.target_ratio
    )
    symbol = ">=" if metric.better is Better.HIGHER else "<="
    return f"{symbol} {metric.target_ratio:g}: {'met' if met else 'MISSED'}"


def _format(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:,.3g}" if abs(value) < 100 else f"{value:,.0f}"


def markdown(results: Results, header: dict[str, str], plots: list[Path]) -> str:
    lines = ["# krust vs Apache Kafka", ""]
    lines += [f"- **{key}**: {value}" for key, value in header.items()]
    lines += [
        "",
        "Medians over repetitions; ratio = krust / Kafka. Targets are reported, never asserted.",
        "",
    ]
    if results.ceilings:
        lines += [
            "## Physical ceiling (same run)",
            "",
            "| measurement | MB/s (median) |",
            "|---|---|",
        ]
        lines += [
            f"| {name} | {_format(statistics.median(samples))} |"
            for name, samples in results.ceilings.items()
        ]
        lines.append("")
    groups: dict[str, list[Metric]] = {}
    for metric in results.values:
        groups.setdefault(metric.group, []).append(metric)
    for group, metrics in groups.items():
        kafka_column, krust_column, ratio_column = metrics[0].columns
        lines += [
            f"## {group}",
            "",
            f"| measurement | unit | {kafka_column} | {krust_column} | {ratio_column} | target "
            "| runs |",
            "|---|---|---|---|---|---|---|",
        ]
        for metric in metrics:
            ratio = _ratio(results, metric)
            runs = "/".join(str(len(results.values[metric].get(b, []))) for b in BROKERS)
            lines.append(
                f"| {metric.name} | {metric.unit} | {_format(results.median(metric, 'kafka'))} "
                f"| {_format(results.median(metric, 'krust'))} | "
                f"{'—' if ratio is None else f'{ratio:.3g}'} | {_verdict(metric, ratio)} "
                f"| {runs} |"
            )
        lines.append("")
    if results.failures:
        lines += ["## Failed runs", ""] + [f"- {failure}" for failure in results.failures] + [""]
    if plots:
        lines += ["## Plots", ""] + [f"![{plot.stem}]({plot.name})" for plot in plots] + [""]
    return "\n".join(lines)


def throughput_plot(results: Results, group: str, path: Path) -> Path | None:
    metrics = [metric for metric in results.values if metric.group == group]
    if not metrics:
        return None
    figure, axes = plt.subplots(figsize=(10, 0.45 * len(metrics) + 1.5))
    height = 0.4
    for offset, broker in enumerate(BROKERS):
        medians = [results.median(metric, broker) or 0.0 for metric in metrics]
        axes.barh(
            [index + offset * height for index in range(len(metrics))],
            medians,
            height=height,
            label=broker,
        )
    axes.set_yticks(
        [index + height / 2 for index in range(len(metrics))],
        [metric.name for metric in metrics],
        fontsize=8,
    )
    axes.invert_yaxis()
    axes.set_xlabel(metrics[0].unit)
    axes.set_title(f"{group} (median)")
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def latency_cdf_plot(results: Results, path: Path) -> Path | None:
    if not results.latency_samples_ms:
        return None
    figure, axes = plt.subplots(figsize=(8, 5))
    for broker, samples in results.latency_samples_ms.items():
        ordered = sorted(samples)
        axes.plot(
            ordered, [(index + 1) / len(ordered) for index in range(len(ordered))], label=broker
        )
    axes.set_xscale("log")
    axes.set_xlabel("end-to-end latency (ms, log scale)")
    axes.set_ylabel("fraction of records")
    axes.set_title("End-to-end latency CDF (last repetition)")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def machine_description() -> str:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    memory_kib = int(Path("/proc/meminfo").read_text().split()[1])
    return (
        f"{platform.system()} {platform.release()}, {cpu}, "
        f"{len(os.sched_getaffinity(0))} cores, {memory_kib / 2**20:.0f} GiB"
    )
