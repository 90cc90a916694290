"""The Paged KV cache page's sentences: each one computed from a replay's numbers, none written in advance.

Plain strings (markdown) from plain data: what the run did overall, what one step did (its events, one
sentence each), memory at a step (paged against the slot cache, fragmentation in bytes), the peak over
the run, and the preempted sequences against their runs alone.
"""

from __future__ import annotations

from inference.api import PagingEvent, PagingStep, PagingTrace


def size(n_bytes: float) -> str:
    """Bytes as people read them: KiB under a MiB, MiB above."""
    if abs(n_bytes) >= 2**20:
        return f"{n_bytes / 2**20:,.2f} MiB"
    return f"{n_bytes / 1024:,.1f} KiB"


def _blocks(blocks: tuple[int, ...]) -> str:
    shown = ", ".join(str(b) for b in blocks[:8]) + (" …" if len(blocks) > 8 else "")
    return f"block{'s' * (len(blocks) != 1)} {shown}"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' * (n != 1)}"


def _capital(text: str) -> str:
    """A sentence that opens with a label ("sample 0 ...") starts with a capital."""
    return text[:1].upper() + text[1:]


def run_sentence(trace: PagingTrace) -> str:
    """The whole run in one sentence: its size, and how often each mechanism fired."""
    return (
        f"This run: {_plural(trace.n_sequences, 'sequence')} in {_plural(len(trace.steps), 'scheduler step')} on a "
        f"pool of {trace.num_blocks} blocks of {trace.block_size} positions ({size(trace.position_bytes * trace.block_size)} "
        f"of K/V each, every layer). The prefix cache shared {_plural(trace.prefix_hits, 'block')}, "
        + (
            f"forking shared {_plural(trace.forked, 'block')} (each forked sequence's prompt blocks, counted once "
            "per sequence), "
            if trace.forked
            else ""
        )
        + f"copy-on-write copied {trace.copies}, and {_plural(trace.preemptions, 'preemption')} happened."
    )


def step_sentence(step: PagingStep, trace: PagingTrace, labels: tuple[str, ...]) -> str:
    """What step ``step.index`` computed and how full the pool is after it."""
    fed = sum(step.fed)
    if step.phase == "prefill":
        who = ", ".join(f"{labels[s]} ({n} positions)" for s, n in zip(step.rows, step.fed))
        did = f"a prefill of {who}"
    else:
        did = f"a decode step: {_plural(len(step.rows), 'sequence')} fed one position each"
    in_use = int((step.ref_counts > 0).sum())
    cached = int(step.cached.sum())
    return (
        f"**Step {step.index}** is {did}"
        + (f" ({_plural(fed, 'position')} computed)" if len(step.rows) > 1 else "")
        + f". After it, {in_use} of "
        f"{trace.num_blocks} blocks are in use and {trace.num_blocks - in_use} free"
        + (f", {cached} of them still holding a cached prefix." if cached else ".")
    )


def event_sentence(event: PagingEvent, labels: tuple[str, ...], block_size: int) -> str:
    """One thing the block manager did, in words."""
    who, blocks, n = _capital(labels[event.sequence]), event.blocks, len(event.blocks)
    match event.kind:
        case "allocate":
            return f"{who} takes {_blocks(blocks)} from the free list."
        case "prefix_hit":
            return (
                f"{who} finds its first {_plural(n, 'full block')} cached ({_blocks(blocks)}): "
                f"{n * block_size} positions it shares instead of computing."
            )
        case "fork":
            return (
                f"{who} is forked from the sequence whose prefill computed the same prompt: it shares all "
                f"{_plural(n, 'block')} ({_blocks(blocks)})."
            )
        case "copy_on_write":
            return (
                f"{who} is about to write into block {blocks[0]}, which another sequence shares: copy-on-write gives "
                f"it block {blocks[1]}, a copy, first."
            )
        case "preempt":
            return f"{who} is preempted: the pool ran out, and as the newest it gives back {_blocks(blocks)} and waits."
        case "resume":
            found = (
                f"finds {_plural(n, 'block')} still cached ({_blocks(blocks)})" if n else "finds nothing still cached"
            )
            return f"{who} resumes after its preemption and {found}; it recomputes the rest of its prompt and output."
        case "finish":
            return (
                f"{who} finishes and gives back {_blocks(blocks)} (a block another sequence still holds stays in use)."
            )
        case _:
            return (
                f"{who} was admitted and put back in the same step: this step's other prompts took the blocks it "
                "needed."
            )


def memory_sentence(step: PagingStep, trace: PagingTrace) -> str:
    """Paged against the slot cache at one step, with each one's fragmentation in bytes."""
    if step.resident == 0:
        return (
            f"After step {step.index} no sequence holds a block: every block is back on the free list, "
            "and a slot cache would hold nothing either."
        )
    ratio = step.slot_bytes / step.paged_bytes if step.paged_bytes else float("inf")
    shared = step.used_bytes - step.distinct_bytes
    sentence = (
        f"After step {step.index} the {_plural(step.resident, 'resident sequence')} "
        f"{'hold their' if step.resident != 1 else 'holds its'} K/V in "
        f"{size(step.paged_bytes)} of blocks; a slot cache, one slot of {trace.slot_capacity} positions (the longest "
        f"request) per sequence, would reserve {size(step.slot_bytes)}, {ratio:.1f}× as much. Fragmentation: the "
        f"slots reserve {size(step.slot_bytes - step.used_bytes)} they have not written; the blocks leave "
        f"{size(step.paged_bytes - step.distinct_bytes)} unwritten, in last blocks not yet full."
    )
    if shared > 0:
        sentence += (
            f" Sharing: the sequences hold {size(step.used_bytes)} of positions between them, but shared blocks "
            f"store {size(shared)} of that only once."
        )
    return sentence


def peak_sentence(trace: PagingTrace) -> str:
    """The peak of each layout over the run."""
    paged = max(s.paged_bytes for s in trace.steps)
    slot = max(s.slot_bytes for s in trace.steps)
    if paged == 0:
        return "No block was ever in use."
    return (
        f"Over the run the blocks in use peaked at {size(paged)}; a slot cache's reservation for the same "
        f"sequences at {size(slot)} ({slot / paged:.1f}× the paged peak)."
    )


def cow_sentence(trace: PagingTrace, samples: int) -> str | None:
    """Why forked samples did or did not copy a block (the prompt's length against the block size)."""
    if samples < 2:
        return None
    length = trace.prompt_lengths[0]
    if trace.copies:
        return (
            f"The prompt's {length} positions end {length % trace.block_size} positions into a block of "
            f"{trace.block_size}: that last block is shared and partly filled, so each sample's first write into it "
            f"copied it ({trace.copies} {'copy' if trace.copies == 1 else 'copies'} in all); the full blocks before it stay shared to the end."
        )
    return (
        f"No copy-on-write: the prompt's {length} positions fill whole blocks of {trace.block_size}, so every sample "
        "writes its answer into a new block of its own and no shared block is ever written."
    )


def preemption_sentence(trace: PagingTrace, labels: tuple[str, ...], alone: tuple[tuple[int, bool], ...]) -> str | None:
    """When each preempted sequence left and came back, and whether its answer equals its run alone."""
    if not alone:
        if any(e.kind == "preempt" for s in trace.steps for e in s.events):
            return None
        return "No sequence was preempted: the pool held every request's blocks to the end."
    sentences = []
    for sequence, equal in alone:
        left = [s.index for s in trace.steps for e in s.events if e.kind == "preempt" and e.sequence == sequence]
        back = [s.index for s in trace.steps for e in s.events if e.kind == "resume" and e.sequence == sequence]
        verdict = (
            "its answer is token for token the one it gives when run alone"
            if equal
            else "its answer differs from its run alone: that would be a bug in the engine"
        )
        sentences.append(
            f"{_capital(labels[sequence])} was preempted at step {', '.join(map(str, left))} and resumed at step "
            f"{', '.join(map(str, back)) or '—'}; {verdict}."
        )
    return " ".join(sentences)


def sequence_status(trace: PagingTrace, step_index: int) -> list[str]:
    """Each sequence's state after step ``step_index``: waiting, running, preempted or finished."""
    status = ["waiting"] * trace.n_sequences
    for step in trace.steps[: step_index + 1]:
        for event in step.events:
            if event.kind in ("allocate", "prefix_hit", "fork", "resume"):
                status[event.sequence] = "running"
            elif event.kind == "preempt":
                status[event.sequence] = "preempted"
            elif event.kind == "finish":
                status[event.sequence] = "finished"
    return status


def window_blocks(n_positions: int, window: int, block_size: int) -> int:
    """Blocks a sliding-window layer still holds at ``n_positions``: a block goes back once every position in it has
    slid out of the last ``window`` (those from ``n_positions - window`` on are still read)."""
    first_read = max(0, n_positions - window)
    return -(-n_positions // block_size) - first_read // block_size


def window_release_sentence(
    n_layers: int, local_layers: int, window: int | None, position_bytes: int, block_size: int, n_positions: int = 1024
) -> str | None:
    """What giving back the blocks that slid out of a local layer's window saves for one request of ``n_positions``
    (``position_bytes``: K and V of one position in every layer). None for a model without sliding-window layers."""
    if not local_layers or window is None or n_positions <= window:
        return None
    per_layer = position_bytes // n_layers
    every = -(-n_positions // block_size)
    without = n_layers * every * block_size * per_layer
    held = ((n_layers - local_layers) * every + local_layers * window_blocks(n_positions, window, block_size)) * (
        block_size * per_layer
    )
    return (
        f"**Sliding-window layers.** {local_layers} of this model's {n_layers} layers read only the last {window:,} "
        f"positions, so the engine's paged cache gives back each of their blocks once it has slid out of the window "
        f"(the other {n_layers - local_layers} keep every block). For one request of {n_positions:,} positions in "
        f"blocks of {block_size}, that is **{size(held)} held instead of {size(without)}** "
        f"({(without - held) / without:.0%} less), and the gap grows by {local_layers} layers' worth of K and V "
        f"with every position past {window:,}."
    )


def step_note(asked: int, last: int) -> str | None:
    """A note when the step asked for (by a link) lies past the replay's last step."""
    if asked <= last:
        return None
    return f"Step {asked} is past this replay's last step ({last}): showing step {last}."
