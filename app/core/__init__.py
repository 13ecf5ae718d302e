"""The domain's vocabulary: names, states, money, text; imports nothing of app."""
