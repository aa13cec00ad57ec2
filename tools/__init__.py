"""Tool packs: argument schemas, implementations and example utterances."""
