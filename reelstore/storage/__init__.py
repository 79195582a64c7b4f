"""Where bytes live: object stores (loose and packed), packs, refs and reflogs, config, the repo."""
