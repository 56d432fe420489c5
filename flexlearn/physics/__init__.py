"""Models with their equations: flexible links (`modal`), the Cosserat rod (`cosserat`), continuum parallel robot
statics (`lse`) and the two-link flexible arm (`arm`)."""
