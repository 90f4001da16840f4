"""The nonresidency predicates, equations 1-3 of reference 004 §2.1, each with both sides
and its margin in bytes:

    (1)  S        > H_cap - R_policy     S: canonical bytes managed from storage
    (2)  T_repr   > H_cap + G_decl       the complete representation
    (3)  U_sem^LB > H_cap + G_phys       the semantic-demand lower bound

The margin is lhs - rhs; an equation holds when its margin is positive. Host and GPU bytes
are added as a relaxation (exceeding the sum is sufficient for nonresidency). A side that
cannot be evaluated (no enforced host cap: the host grade is not `hard`; a GPU observation
that failed, so G is unknown) leaves the equation unevaluated (`holds: null`, with why),
never held. Without a GPU the observer's grade `absent` gives G = 0 as evidence.
Beside them, the operating-system-visible capacity observation: U_sem^LB against
MemTotal + G_phys (not an authority, only what Linux and the boards expose).
"""

from __future__ import annotations

EQUATIONS = {
    1: ("S", "H_cap - R_policy"),
    2: ("T_repr", "H_cap + G_decl"),
    3: ("U_sem^LB", "H_cap + G_phys"),
}


def _equation(n: int, lhs: int | None, rhs: int | None, missing: list[str]) -> dict:
    lhs_name, rhs_name = EQUATIONS[n]
    evaluable = lhs is not None and rhs is not None and not missing
    margin = lhs - rhs if evaluable else None
    return {"equation": n, "statement": f"{lhs_name} > {rhs_name}", "lhs": lhs_name, "lhs_bytes": lhs,
            "rhs": rhs_name, "rhs_bytes": rhs if evaluable else None, "margin_bytes": margin,
            "holds": (margin > 0) if evaluable else None,
            "not_evaluable": None if evaluable else "; ".join(missing or ["a side is missing"])}


def _host_cap(host: dict) -> tuple[int | None, list[str]]:
    if host.get("grade") != "hard" or host.get("limit_bytes") is None:
        return None, [f"no enforced host cap H_cap (host grade {host.get('grade')!r})"]
    return int(host["limit_bytes"]), []


def _gpu(gpu: dict, key: str) -> tuple[int | None, list[str]]:
    if gpu.get("grade") in ("audited", "absent"):
        return int(gpu.get(key) or 0), []
    return None, [f"GPU observation {gpu.get('grade')!r}: {'G_decl' if key == 'g_decl_bytes' else 'G_phys'} unknown ({gpu.get('reason')})"]


def evaluate(s_bytes: int | None, t_repr: int | None, u_sem_lb: int | None, reserve: int | None,
             host: dict, gpu: dict) -> dict:
    """Equations 1-3 from the inventory (S, T_repr, U_sem^LB), the reserve and the
    authority records (harness.json `host` and `gpu`)."""
    cap, why_cap = _host_cap(host)
    g_decl, why_decl = _gpu(gpu, "g_decl_bytes")
    g_phys, why_phys = _gpu(gpu, "g_phys_bytes")
    why_reserve = [] if reserve is not None else ["no declared reserve R_policy"]
    eqs = [
        _equation(1, s_bytes, cap - reserve if cap is not None and reserve is not None else None,
                  why_cap + why_reserve),
        _equation(2, t_repr, cap + g_decl if cap is not None and g_decl is not None else None, why_cap + why_decl),
        _equation(3, u_sem_lb, cap + g_phys if cap is not None and g_phys is not None else None, why_cap + why_phys),
    ]
    visible = host.get("mem_total_bytes")
    observation = None
    if visible is not None and g_phys is not None and u_sem_lb is not None:
        observation = {"statement": "U_sem^LB > MemTotal + G_phys", "lhs_bytes": u_sem_lb,
                       "rhs_bytes": int(visible) + g_phys, "margin_bytes": u_sem_lb - int(visible) - g_phys}
    return {"equations": eqs, "visible_capacity": observation,
            "h_cap_bytes": cap, "r_policy_bytes": reserve, "g_decl_bytes": g_decl, "g_phys_bytes": g_phys}
