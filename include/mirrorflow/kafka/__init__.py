"""A small client layer over confluent-kafka: config rendering, admin queries, and errors that name the cluster.

Other packages import the module they need (each holds one kind of thing, and
importing this package imports none of them):

- :mod:`~mirrorflow.kafka.config`: ``ClusterClient``, a cluster's settings
  rendered as admin, consumer and producer configs, its secrets hidden;
- :mod:`~mirrorflow.kafka.admin`: the admin queries planners and checks need
  (probe, topics, offsets, topic ids, groups);
- :mod:`~mirrorflow.kafka.shared`: one admin client per cluster for a while
  (a plan), instead of one per question;
- :mod:`~mirrorflow.kafka.topics`: target topics kept in the source's shape;
- :mod:`~mirrorflow.kafka.ownership`: whose travelling configs a topic follows, and
  what becomes of a follower's own value (pure); :mod:`~mirrorflow.kafka.config_sync`
  reads the owners for a plan, :mod:`~mirrorflow.kafka.config_memory` keeps what was
  applied on each follower;
- :mod:`~mirrorflow.kafka.grants`: which topic ACLs travel from their owner and as
  what (pure); :mod:`~mirrorflow.kafka.guard`: a read-only cluster's denies (pure);
  :mod:`~mirrorflow.kafka.grant_sync` creates and deletes both and records what
  mirrorflow made;
- :mod:`~mirrorflow.kafka.ranges`: bounded reads, from an offset to an end;
- :mod:`~mirrorflow.kafka.records`: a consumed record's parts, read safely;
- :mod:`~mirrorflow.kafka.compacted`: one-partition compacted topics as key-value stores;
- :mod:`~mirrorflow.kafka.codes`: error codes grouped by what they mean;
- :mod:`~mirrorflow.kafka.refusals`, :mod:`~mirrorflow.kafka.handshake`,
  :mod:`~mirrorflow.kafka.principal`: a refused permission or login, said as an
  operator reads it, and who a client logs in as;
- :mod:`~mirrorflow.kafka.deadline`: a deadline of our own around a call that
  may not keep its timeout.
"""
