"""The one thing setup.cfg cannot declare: the optional C accelerator of batch reads.

`reelstore.storage._stored_batch` (reelstore/storage/_stored_batch.c) runs `cat-file --batch`'s
per-object loop. It is optional: without a C compiler or Python's headers, the build skips it and
reelstore reads in pure Python (docs/commands/cat-file.md, "The C accelerator").
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("reelstore.storage._stored_batch", ["reelstore/storage/_stored_batch.c"],
                  extra_compile_args=["-O2"], optional=True),
    ],
)
