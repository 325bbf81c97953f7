"""Consumer-group offsets across clusters: portable positions, their distribution, and failover.

A group's committed offset means nothing on another cluster: the same message
sits at a different offset there. The owner cluster (where the group runs)
publishes *portable positions* (:mod:`.position`) to the internal topic
``_mirrorflow.offsets``; that topic travels the distribution tree like data
(:mod:`.distribute`); on every other cluster a committer translates each
position to a local offset (:mod:`.translate`) and commits it for groups that
are not active there (:mod:`.sync`). :mod:`.failover` moves a group on purpose.
"""
