"""Testing support: brute-force oracles and input strategies shared by every test."""
