"""Latency budget reports from turn records (Markdown, HTML, PNG plots) and the live
MQTT view. Plots need matplotlib and the live view aiomqtt (`voice-agent[reports]`)."""
