"""Effect interception for `reel run`: backends that turn what a command does into a view's changes."""
