"""autoprovision: wait for scarce GPU machines and deploy one the moment stock appears."""
