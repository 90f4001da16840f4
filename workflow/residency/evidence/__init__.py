"""evidence: what one run shows, computed from its records: exactness against the oracle,
demand and extents, traffic, the predicates and the certificate, the fault validators, the
tensor reference, the matched premise. Imports core only."""
