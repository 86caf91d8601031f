"""Citations: how a range of a source is named, attributed and verified."""
