"""The operators' command ``python -m mirrorflow.acls TOPOLOGY``, kept where README and deploy/ say it is.

The code is :mod:`mirrorflow.needed_acls` (the ACLs mirrorflow's own principal
needs); this package only forwards the command to it, so scripts written against
the documented command keep working. Import from :mod:`mirrorflow.needed_acls`.
"""
