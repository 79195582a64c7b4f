"""The command index: each command's module and one-line help, so `reel --help` (and finding the
module of the command that runs) needs no command module imported. The module's package (porcelain or
plumbing) is also the section `reel --help` lists the command under. `tests/project/test_startup.py` checks
it against the modules themselves and prints the table to paste when a command is added or changed."""

COMMANDS: dict[str, tuple[str, str]] = {
    "cat-file": (
        "reelstore.plumbing.cat_file",
        "Show object NAME (a revision: an id, a unique prefix of 4+ hex digits, a ref, NAME~N, NAME:PATH…).",
    ),
    "count-objects": (
        "reelstore.plumbing.count_objects",
        "Count loose objects and their KiB; with -v also in-pack, packs, size-pack, prune-packable, garbage.",
    ),
    "for-each-ref": (
        "reelstore.plumbing.for_each_ref",
        "Print each ref matching PATTERNS (a prefix such as refs/views, or a glob) through FMT.",
    ),
    "fsck": (
        "reelstore.plumbing.fsck",
        "Re-hash every object, check packs, walk from every ref and reflog, check record and journal chains.",
    ),
    "hash-object": (
        "reelstore.plumbing.hash_object",
        "Print the id of each FILE's (or stdin's) content as an object of KIND; -w also stores it.",
    ),
    "index-pack": (
        "reelstore.plumbing.index_pack",
        "Inflate, re-hash and decode every entry of PACK (as unpack-objects does), check its trailer, and "
        "write PACK's .idx beside it (every object's mtime is now).",
    ),
    "ls-tree": (
        "reelstore.plumbing.ls_tree",
        "List OBJ (a tree, or a record or view: its namespace root) as git's `MODE TYPE ID<TAB>NAME` lines.",
    ),
    "pack-objects": (
        "reelstore.plumbing.pack_objects",
        "Pack the objects whose ids come on stdin (one per line, optionally `ID NAME`), or with --all/--revs "
        "everything reachable.",
    ),
    "prune": (
        "reelstore.plumbing.prune",
        "Remove loose objects no ref or young reflog entry reaches and that are older than AGE.",
    ),
    "reflog": ("reelstore.plumbing.reflog", "Show the reflog of REF (default: the trunk's head)."),
    "repack": ("reelstore.plumbing.repack", "Pack objects."),
    "rev-list": (
        "reelstore.plumbing.rev_list",
        "List what REFs (revisions: ids, prefixes, ref names, NAME~N, NAME@{N}; A..B, A...B or ^A to exclude) lead to.",
    ),
    "show-ref": (
        "reelstore.plumbing.show_ref",
        "List refs whose names end with one of PATTERNS (all refs if none); E001 if nothing matches.",
    ),
    "unpack-objects": (
        "reelstore.plumbing.unpack_objects",
        "Read a pack on stdin, verify all of it (trailer, every entry inflated, decoded and re-hashed), then "
        "store each object loose.",
    ),
    "update-ref": (
        "reelstore.plumbing.update_ref",
        "Set REF to NEW if it currently holds OLD (zeros or '' for OLD: REF must not exist).",
    ),
    "verify-pack": (
        "reelstore.plumbing.verify_pack",
        "Verify each PACK (a .pack or .idx path; default every pack of the store).",
    ),
    "abort": (
        "reelstore.porcelain.abort",
        "Abort VIEW (and its live descendants): refs deleted, no fire capability minted.",
    ),
    "approve": ("reelstore.porcelain.approve", "Approve VIEW's pending effects and names exactly as they are now."),
    "bundle": (
        "reelstore.porcelain.bundle",
        "Create, verify and unbundle single-file archives of refs and their objects.",
    ),
    "clone": (
        "reelstore.porcelain.clone",
        "Clone URL into DIRECTORY (default: the last part of the URL, without .git).",
    ),
    "commit": (
        "reelstore.porcelain.commit",
        "Commit VIEW: checks, then the target's compare-and-swap, then (into a trunk) the drain.",
    ),
    "config": ("reelstore.porcelain.config_cmd", "Print KEY's value (E001 if unset), or set it to VALUE."),
    "demo": (
        "reelstore.porcelain.demo",
        "Fork two views, queue fs effects, commit one, abort the other, gc, and show what fired and what vanished.",
    ),
    "diff": (
        "reelstore.porcelain.diff",
        "List VIEW's changes against its base: A added, M modified, D removed, with old and new ids.",
    ),
    "drain": (
        "reelstore.porcelain.drain",
        "Claim owed effects of a shared (Postgres) store with a lease, journal each intent, send, settle; take "
        "over effects whose worker's lease ran out (keyed resent, queryable asked, blind parked unknown).",
    ),
    "effect": (
        "reelstore.porcelain.effect",
        "Admit an effect into VIEW's buffer; it fires only when the view's changes reach a trunk.",
    ),
    "fetch": (
        "reelstore.porcelain.fetch",
        "Fetch REMOTE (default: origin), then fast-forward local trunks that have not diverged and retire "
        "local views whose commit has landed.",
    ),
    "fork": ("reelstore.porcelain.fork", "Fork view NAME: one view object and one ref, whatever the namespace's size."),
    "gc": (
        "reelstore.porcelain.gc",
        "Mark from every ref and young reflog entry, then pack and prune (holds .reel/gc.lock).",
    ),
    "get": (
        "reelstore.porcelain.get",
        "Print the bytes stored under NAME in VIEW (or in a trunk's head: `main`, `refs/heads/main`), "
        "streamed piece by piece whatever their size.",
    ),
    "help": (
        "reelstore.porcelain.help",
        "Show help on TOPIC: `errors` (every E-code with its exit status, meaning and next action) or a "
        "command name (the same as `reel COMMAND --help`); with no TOPIC, the list of commands.",
    ),
    "hold": (
        "reelstore.porcelain.hold",
        "Put the store on hold: effects are refused at admission and nothing drains (E012, exit 6).",
    ),
    "init": (
        "reelstore.porcelain.init",
        "Create DIRECTORY/.reel (default: here) with config, the trunk and sample hooks.",
    ),
    "log": (
        "reelstore.porcelain.log",
        "Show the records REVISIONs select (a trunk, A..B, ^A B, A...B; default: the store's trunk), newest "
        "first, with their effects' outcomes.",
    ),
    "ls": ("reelstore.porcelain.ls", "List names (and blob ids) under PREFIX in VIEW, in name order."),
    "mcp": (
        "reelstore.porcelain.mcp",
        "Run an MCP server whose tools fork, write, queue effects, commit and abort views of one trunk, never"
        " wider than --cap.",
    ),
    "op": (
        "reelstore.porcelain.op",
        "Show the store's operation log (`reel op log`; alone, `reel op` runs it); `reel undo` reverts the "
        "newest operation.",
    ),
    "ops": (
        "reelstore.porcelain.ops",
        "List the operations of committed records: state, tier, resource, and what to do next.",
    ),
    "push": ("reelstore.porcelain.push", "Push REFS (default: every trunk and view) to REMOTE (default: origin)."),
    "put": ("reelstore.porcelain.put", "Store FILE (or stdin, '-') under NAME in VIEW; prints the content id."),
    "reconcile": ("reelstore.porcelain.reconcile", "Settle unknown operation OP with attributed evidence."),
    "recover": (
        "reelstore.porcelain.recover",
        "Fence every older drainer with a new epoch, then resume: a not-sent effect is sent again (any tier);"
        " of the unknown ones, keyed effects are resent with the same key, queryable and two-phase ones "
        "reconciled first, blind ones stay unknown (exit 7).",
    ),
    "reject": (
        "reelstore.porcelain.reject",
        "Refuse VIEW's pending effects as they are now: its commit is refused (E018) until the view changes "
        "and is approved again.",
    ),
    "release": ("reelstore.porcelain.release", "Lift the hold."),
    "remote": (
        "reelstore.porcelain.remote",
        "Add, rename, remove or list remotes, or print one's URL (with no subcommand: list).",
    ),
    "replay": (
        "reelstore.porcelain.replay",
        "Run CMD with its reads answered from SOURCE's recording (a view or a record made by `reel run "
        "--record`), in order and with no network; its effects go into a new view of the same trunk.",
    ),
    "restore": (
        "reelstore.porcelain.restore",
        "Reset a view to SNAPSHOT (in place if live): names exactly, Class B re-checked, Class C pending.",
    ),
    "rm": ("reelstore.porcelain.rm", "Remove NAME from VIEW."),
    "run": (
        "reelstore.porcelain.run",
        "Run CMD in a fresh view: http(s) requests through a capturing proxy, the network sealed off around "
        "it, files in a scratch directory.",
    ),
    "show": (
        "reelstore.porcelain.show",
        "Show OBJ (an id, a unique prefix, or a ref/view/trunk name): its kind, id and fields.",
    ),
    "sim": (
        "reelstore.porcelain.sim",
        "Run seeded simulations (crashes at every step, lost requests and answers, zombie drainers, torn "
        "writes, concurrent committers, aborts racing commits) and check the invariants after each.",
    ),
    "snapshot": (
        "reelstore.porcelain.snapshot",
        "Snapshot VIEW as NAME (default: the view's name): `refs/snapshots/NAME` at the view's object.",
    ),
    "status": (
        "reelstore.porcelain.status",
        "Show VIEW's base, changed names, pending effects in order and capabilities (no VIEW: every view).",
    ),
    "undo": (
        "reelstore.porcelain.undo",
        "Undo the newest operation (`reel op log`): each ref it moved goes back, if none moved since.",
    ),
    "views": (
        "reelstore.porcelain.views",
        "List live views: name, id, parent, boundary, changed names, pending effects and the remote each is "
        "bound to (its one commit point), or `-`.",
    ),
}
