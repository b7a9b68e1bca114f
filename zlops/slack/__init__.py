"""The one Slack gateway: the client, the outbox sender, what a night says (docs/design/layers.md)."""
