"""Transports: sans-I/O wire codecs and the websocket server around them."""
