"""The brain's training side: the dialogue simulator and its scenarios, augmentation,
heard lines, the independent caller data, the synthetic engine task, scoring, and the
caller-hint banks' builder. The runtime dialogue format it writes for is
`voice_agent/dialogue/` (prompts/FORMAT.md); a live call never imports this package."""
