"""What F's peak in-flight depth can be, written once for C2 and C8 (their values carry it
beside the assertion "peak depth = windows", so a reader sees why the engine reaches it
and where it differs from the reference's executor)."""

DEPTH_GUARANTEE = (
    "The bounded source has N windows; the pager's read-ahead holds at most N-1 of them (the "
    "last stays for demand reads), so depth N is reached only when a step's demand read is in "
    "flight beside N-1 read-ahead reads. It cannot be otherwise without a deadlock: a landed "
    "read-ahead bundle stays HOST_READY in its window until its target step begins (its room "
    "is made then, with victims chosen at the lockstep cursor exactly as D's demand faults "
    "would choose them), so if read-ahead could fill all N windows with bundles for later "
    "steps, the current step's demand read (a chunk no schedule declared, a bundle evicted "
    "again) would find no window and the step would never end. Where this differs from the "
    "reference: its windows return to Free after the host-to-device copy, so a window there "
    "is held only while its read is in flight; here a read-ahead window is held until its "
    "step begins, and the depth N can come only from a step with a demand read.")
