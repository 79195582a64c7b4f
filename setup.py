"""The one thing setup.cfg cannot declare: the optional C accelerator of batch reads.

`reelstore.backend.packs._stored_batch` (reelstore/backend/packs/_stored_batch.c, with its BLAKE3 in _blake3.h) runs
`cat-file --batch`'s per-object loop. It is optional: without GCC (its BLAKE3 uses GCC's vector
extension) or Python's headers, the build skips it and reelstore reads in pure Python
(docs/commands/cat-file.md, "The C accelerator"). It is compiled with the flags Python was built with.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "reelstore.backend.packs._stored_batch",
            ["reelstore/backend/packs/_stored_batch.c"],
            depends=["reelstore/backend/packs/_blake3.h"],
            optional=True,
        ),
    ],
)
