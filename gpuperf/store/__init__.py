"""Every persistent format behind one interface: baseline files, results files and the history database."""
