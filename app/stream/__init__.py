"""The event stream's moving parts: the streams open here, and the publisher waking them."""
