"""The small and wan scenarios' results: markdown tables with a column per tool, and runs with a deadline.

A cell holds every run's value (None for a run that did not finish in time) and shows their median. When a
baseline build was measured, a last column gives this build's median over the baseline's, so a comparison of two
builds is one command (see docs/performance.md).
"""
import statistics, subprocess, time


def attempt(command, timeout, **kwargs):
    """Seconds `command` took, or None when it did not finish within `timeout` seconds (it is killed) or failed."""
    start = time.perf_counter()
    try:
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=timeout,
                       **kwargs)
    except subprocess.TimeoutExpired:
        return None
    except subprocess.CalledProcessError:
        return None
    return time.perf_counter() - start


def median(values):
    """The median of the runs that finished; None (did not finish) when fewer than half of the runs finished."""
    finished = [v for v in values if v is not None]
    if not finished or len(finished) * 2 < len(values):
        return None
    return statistics.median(finished)


class Table:
    """Rows of measures against columns of tools. `fmt` turns a median into text, e.g. '1.23 s'."""

    def __init__(self, title, columns, baseline=None, timeout=None, rows=()):
        """`rows`: labels in the order they are shown, whatever order they are measured in."""
        self.title, self.columns, self.baseline, self.timeout = title, list(columns), baseline, timeout
        self.rows = {row: {} for row in rows}  # label -> {column: ([values], fmt)}

    def add(self, row, column, value, fmt="{:.2f}"):
        cells = self.rows.setdefault(row, {})
        values, _ = cells.get(column, ([], fmt))
        cells[column] = (values + [value], fmt)

    def value(self, row, column):
        """The median of a cell, None if it did not finish or was not measured."""
        cell = self.rows.get(row, {}).get(column)
        return median(cell[0]) if cell else None

    def text(self, row, column):
        cell = self.rows.get(row, {}).get(column)
        if cell is None:
            return "–"
        values, fmt = cell
        value = median(values)
        if value is None:
            return f"did not finish in {self.timeout:.0f} s" if self.timeout else "did not finish"
        shown = fmt(value) if callable(fmt) else fmt.format(value)
        unfinished = sum(1 for v in values if v is None)
        return shown + (f" ({unfinished} of {len(values)} runs did not finish)" if unfinished else "")

    def markdown(self):
        ab = self.baseline is not None and len(self.columns) > 1
        header = ["", *self.columns] + ([f"{self.columns[0]} ÷ {self.baseline}"] if ab else [])
        lines = [f"**{self.title}**", "", "| " + " | ".join(header) + " |",
                 "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|"]
        for row in self.rows:
            if not self.rows[row]:
                continue  # a measure this run did not make (e.g. the movie in a smoke run)
            cells = [self.text(row, column) for column in self.columns]
            if ab:
                ours, theirs = self.value(row, self.columns[0]), self.value(row, self.baseline)
                cells.append(f"{ours / theirs:.2f}" if ours is not None and theirs else "–")
            lines.append("| " + " | ".join([row, *cells]) + " |")
        return "\n".join(lines) + "\n"


class Goals:
    """Goals checked in one run: each row a measure, what it is held against, their ratio and the verdict."""

    def __init__(self, title):
        self.title, self.rows = title, []

    def add(self, goal, measured, limit, reference=None, shown="{:.2f}", reference_shown=None):
        """`measured` over `reference` must be at most `limit`; with no reference, `measured` itself (a count).
        Returns the value held against `limit`, None when a side was not measured."""
        absolute = reference_shown is None
        value = None
        if measured is not None and (absolute or reference):
            value = measured if absolute else measured / reference
        measured_text = "not measured" if measured is None else shown.format(measured)
        reference_text = "–" if absolute else (reference_shown if reference else "not measured")
        ratio = "–" if absolute or value is None else f"{value:.2f}"
        verdict = "–" if value is None else ("met" if value <= limit else "**missed**")
        self.rows.append((goal, measured_text, reference_text, ratio, verdict))
        return value

    def markdown(self):
        lines = [f"**{self.title}**", "", "| goal | measured | held against | ratio | |", "|---|---:|---:|---:|---|"]
        lines += ["| " + " | ".join(row) + " |" for row in self.rows]
        return "\n".join(lines) + "\n"
