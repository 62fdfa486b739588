"""Text that comes from outside: JSON read safely, untrusted text shown safely, credentials
redacted, the line formats other programs hand in."""
