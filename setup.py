"""The one thing setup.cfg cannot declare: the optional C accelerator of batch reads.

`reelstore.storage._stored_batch` (reelstore/storage/_stored_batch.c, linked with zlib) runs
`cat-file --batch`'s per-object loop. It is optional: without a C compiler, Python's headers or
zlib's, the build skips it and reelstore reads in pure Python (docs/commands/cat-file.md, "The C
accelerator").
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("reelstore.storage._stored_batch", ["reelstore/storage/_stored_batch.c"], libraries=["z"],
                  extra_compile_args=["-O2"], optional=True),
    ],
)
