"""A small client layer over confluent-kafka: config rendering and admin queries."""
