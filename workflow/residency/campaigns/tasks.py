"""The utility tasks (reference 004 Appendix A.2, A.4, B; claims C5, C6, C11): short
extractive question-answering tasks written for this project, made from a fixed seed.

Each task is a passage of a few sentences assembled from the word lists below (a person,
an object, a place, a count) and a question about one sentence whose answer is a span of
the passage (a place, a person or a number). The same seed and count give the same tasks
on every machine (random.Random with the seed; nothing else is read). Each task runs
through `residctl generate` on the primary model in these cells: the oracle, the resident
path (kernel-mmap, no host limit), whose tokens and logit rows every other cell of the task
is compared with; one control per `tasks.controls` arm and the candidate (`tasks.arm`),
all nonresident under the candidate's own hard host limit r * T_repr + O (reference 004
A.4: "the strongest control satisfying the exactness contract", under the same hard 6 GiB
cap as the candidate, Table 9). `premise_error` refuses a config that breaks this before
any cell runs.

The answer a run gives is its generated text up to the first line break (the prompt ends
in "Answer:", so the first line is the answer the model wrote); it is scored against the
task's reference span with token F1 (`f1`), SQuAD's normalization: lowercase, punctuation
and the articles a/an/the removed, whitespace tokens, precision and recall over the
multiset overlap of tokens.
"""

from __future__ import annotations

import random
import re
import string
from collections import Counter

from residency.core import arms
from residency.campaigns import cells
from residency.core.identity import digest

TASK_RUNS = "results/runs/tasks"
TASK_TABLE = "results/tasks.parquet"
ORACLE, CONTROL, CANDIDATE = "oracle", "control", "candidate"
ROLES = (ORACLE, CONTROL, CANDIDATE)

FIRST_NAMES = ("Mara", "Tomas", "Ilse", "Oren", "Priya", "Dario", "Keiko", "Lucan", "Nadia", "Ferris",
               "Halva", "Joaquin", "Selma", "Viktor", "Anouk", "Bram")
LAST_NAMES = ("Voss", "Ward", "Lindqvist", "Achebe", "Moreau", "Kaur", "Brandt", "Okafor", "Sato", "Reyes",
              "Novak", "Quill")
PLACES = ("Lisbon", "Oslo", "Nairobi", "Quito", "Tallinn", "Osaka", "Porto", "Cork", "Hobart", "Lyon",
          "Tromso", "Valletta", "Ghent", "Cusco")
OBJECTS = ("lanterns", "kettles", "violins", "maps", "baskets", "telescopes", "clocks", "umbrellas", "ledgers",
           "compasses", "candles", "kites")
VERBS = (("carried", "carry"), ("sold", "sell"), ("painted", "paint"), ("repaired", "repair"),
         ("delivered", "deliver"), ("counted", "count"))
KINDS = ("place", "person", "count")


def _people(rng: random.Random, k: int) -> list[str]:
    firsts = rng.sample(FIRST_NAMES, k)
    return [f"{f} {rng.choice(LAST_NAMES)}" for f in firsts]


def make_task(rng: random.Random, index: int) -> dict:
    """One task: 3 or 4 sentences, each a different person, object and place; the question
    asks about one of them and its answer is that sentence's place, person or count."""
    k = rng.randint(3, 4)
    people = _people(rng, k)
    places = rng.sample(PLACES, k)
    objects = rng.sample(OBJECTS, k)
    counts = rng.sample(range(2, 60), k)
    verbs = [rng.choice(VERBS) for _ in range(k)]
    sentences = [f"{p} {v[0]} {n} {o} in {pl}." for p, v, n, o, pl in zip(people, verbs, counts, objects, places)]
    j = rng.randrange(k)
    kind = KINDS[index % len(KINDS)]
    p, (past, base), n, o, pl = people[j], verbs[j], counts[j], objects[j], places[j]
    if kind == "place":
        question, answer = f"Where did {p} {base} the {o}?", pl
    elif kind == "person":
        question, answer = f"Who {past} the {o} in {pl}?", p
    else:
        question, answer = f"How many {o} did {p} {base} in {pl}?", str(n)
    passage = " ".join(sentences)
    return {"id": f"t{index:02d}", "kind": kind, "passage": passage, "question": question, "answer": answer,
            "answer_start": passage.index(sentences[j]) + sentences[j].index(answer)}


def generate(seed: int, n: int) -> list[dict]:
    """The n tasks of a seed, in order (t00, t01, ...)."""
    rng = random.Random(f"residency-tasks/{seed}")
    return [make_task(rng, i) for i in range(n)]


def prompt(task: dict) -> str:
    """The prompt of a task: passage, question, then "Answer:" for the model to continue."""
    return f"Passage: {task['passage']}\nQuestion: {task['question']}\nAnswer:"


def answer_of(response: str) -> str:
    """A run's answer: its generated text up to the first line break, stripped."""
    return response.lstrip().split("\n", 1)[0].strip()


# ---- the scorer (SQuAD-style token F1) ----------------------------------------------------

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)


def normalize(text: str) -> str:
    """Lowercase, punctuation removed, articles a/an/the removed, whitespace collapsed."""
    text = text.lower().translate(_PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def f1(prediction: str, reference: str) -> float:
    """Token F1 of a prediction against a reference: precision and recall over the multiset
    overlap of their normalized tokens. Both empty: 1.0; one empty: 0.0."""
    p, r = normalize(prediction).split(), normalize(reference).split()
    if not p or not r:
        return float(p == r)
    common = sum((Counter(p) & Counter(r)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(p), common / len(r)
    return 2 * precision * recall / (precision + recall)


def exact_match(prediction: str, reference: str) -> bool:
    return normalize(prediction) == normalize(reference)


# ---- the cells ----------------------------------------------------------------------------


def task_list(config: dict) -> list[dict]:
    t = config["tasks"]
    return generate(t["seed"], t["n"])


def task_ids(config: dict) -> list[str]:
    return [t["id"] for t in task_list(config)]


def task_by_id(config: dict, task_id: str) -> dict:
    return {t["id"]: t for t in task_list(config)}[task_id]


def longest(config: dict) -> dict:
    """The task with the longest prompt (the calibration runs answer it)."""
    return max(task_list(config), key=lambda t: (len(prompt(t)), t["id"]))


def calibration_runs(config: dict) -> list[str]:
    """The candidate arm's calibration runs (its overhead O at the task runs' context)."""
    return [f"{TASK_RUNS}/calibrate/rep{k}/harness.json" for k in range(1, config["harness"]["overhead_reps"] + 1)]


def cells_of(config: dict) -> list[str]:
    """A task's cells in run order, named as their run directories: the oracle, each
    control (control-<arm>, in config order), the candidate."""
    return [ORACLE, *(f"{CONTROL}-{a}" for a in config["tasks"]["controls"]), CANDIDATE]


def role_of(cell: str) -> str:
    return CONTROL if cell.startswith(CONTROL + "-") else cell


def task_run(task_id: str, cell: str) -> str:
    return f"{TASK_RUNS}/{task_id}/{cell}/harness.json"


def task_runs(config: dict) -> list[str]:
    """Every task's cells: its oracle, its controls, its candidate."""
    return [task_run(i, c) for i in task_ids(config) for c in cells_of(config)]


# ---- the premise (docs/design.md) ------------------------------------------------------------

CONTROL_ARMS = (arms.KERNEL_MMAP, arms.PAGER_LRU, arms.PAGER_DECLARED, arms.PAGER_PREFETCH, arms.PAGER_ZERO)
_RESIDENT = ("resident", ORACLE)
_WHY = ("reference 004 A.4: \"the strongest control satisfying the exactness contract\", nonresident under the "
        "candidate's hard 6 GiB cap, Table 9")


def premise_error(config: dict) -> str | None:
    """One line naming the key when a control would not be nonresident under the
    candidate's own hard limit r * T_repr + O, else None. Eq. 1 with R_policy = O: the
    weights T_repr exceed H_cap - R_policy = r * T_repr exactly when r < 1."""
    t = config["tasks"]
    if float(t["ratio"]) >= 1:
        return (f"config error: tasks.ratio: {t['ratio']} makes the hard limit r x T_repr + O hold every weight, so "
                f"each control would be the resident path; a control runs nonresident, r < 1 ({_WHY})")
    for i, arm in enumerate(t["controls"]):
        where = f"config error: tasks.controls[{i}]: {arm!r}"
        if arm in _RESIDENT:
            return (f"{where} is the resident path (kernel-mmap, no host limit), the exactness oracle of every task "
                    f"run, not a control; a control runs under the candidate's hard limit r x T_repr + O ({_WHY})")
        if arm == t["arm"]:
            return f"{where} is the candidate's arm (tasks.arm); a control is another mechanism"
        if arm not in CONTROL_ARMS:
            return f"{where} is not one of the control arms {', '.join(CONTROL_ARMS)}"
    return None


def tasks_digest(config: dict) -> str:
    """The task runs use the primary model's real-model study (model, threads, chunk size,
    source) with the tasks section on top."""
    view = cells.model_view(config)
    return digest(cells.pm_sections(view) | {"tasks": config["tasks"]})


def cell_arm(config: dict, cell: str) -> str:
    if cell == ORACLE:
        return arms.KERNEL_MMAP
    return config["tasks"]["arm"] if cell == CANDIDATE else cell[len(CONTROL) + 1:]


def generate_args(config: dict, cell: str, model: str, budget) -> list[str]:
    """residctl generate flags of one task run (prompt and run directory added by the rule).
    No --graph-plan: each prompt has its own prefill shape, so the run learns its own. A
    pager arm gets the weight budget r * T_repr; kernel-mmap none (its host limit caps it)."""
    view = cells.model_view(config)
    pm, t = view["pager_model"], config["tasks"]
    arm = cell_arm(config, cell)
    args = cells.opts(model=model, arm=arm, chunk_size=pm["chunk_bytes"], tokens=t["tokens"], threads=pm["threads"],
                      ctx=t["ctx"], watchdog_s=pm["watchdog_s"])
    huge = cells.opts(huge_chunks=pm["huge_chunks"])
    return args + cells.pager_flags(pm, arm, budget, pm["source"], huge, cells.pm_content_digests(view))


def harness_args(config: dict, cell: str, budget, overhead: str, t_repr: int, task_id: str) -> list[str]:
    """Every cell but the oracle runs under the candidate's hard host limit r * T_repr + O
    (O the task runs' calibrated overhead); the oracle, the resident path, under none."""
    t = config["tasks"]
    role, arm = role_of(cell), cell_arm(config, cell)
    kv = {"campaign": "tasks", "task": task_id, "role": role, "arm": arm, "t_repr_bytes": t_repr}
    if role == CONTROL:
        kv["control_index"] = t["controls"].index(arm)  # 0: the established control (C5's)
    limit = []
    if role != ORACLE:
        kv["r"] = cells.ratio_str(t["ratio"])
        limit = cells.opts(budget_bytes=budget, overhead=overhead)
    return limit + cells.meta_flags(tasks_digest(config), kv)
