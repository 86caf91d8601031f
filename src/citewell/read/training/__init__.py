"""Training citewell's reader (torch): the data (``data``), the network (``net``), the loop
(``loop``), its figures (``metrics``) and shipping the result (``card``). docs/reader.md."""
