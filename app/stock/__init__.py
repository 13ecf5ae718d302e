"""Pure stock-history maths over plain values; imports only app.core."""
