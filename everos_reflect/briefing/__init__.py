"""The bounded briefing (seeds 000, 002, 004): one block of memory for a query that fits a token
budget, built from every tier in priority order.

``tokens`` counts with the bundled tokenizer, ``routing`` decides whether a question asks for a
pattern or an instance, ``pack`` fits ranked items into the budget (pure), and ``build``
gathers the candidates from the store and the index.
"""
